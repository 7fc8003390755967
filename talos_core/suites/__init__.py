"""Suites: the paper's comparison, reproduced end to end on models that run offline, into one store.

``talos suite text --store cached_results`` runs everything and writes every result the dashboard reads (see
``talos_core/evaluation/SCHEMA.md``). A suite is data (a :class:`SuiteSpec` with its scales); a suite run is a table
of :class:`Step` s (:func:`suite_steps`), each one evaluation protocol of :mod:`talos_core.evaluation.protocols`,
executed by :func:`run_suite` (in order, or on worker processes or Ray), which records the time of every step and can
resume an interrupted run.

The package, from the bottom layer up (a module imports only modules listed before it;
``tests/test_architecture.py`` checks it):

- ``costs`` — the measured cost table of ``--plan`` (``plan_costs.json``) and models' architecture keys
- ``specs`` — :class:`Scale`, :class:`SuiteSpec`, the registered suites (:data:`SUITES`), :func:`get_suite`,
  :func:`with_model`, :func:`default_scale`
- ``steps`` — :class:`Step`, :func:`suite_steps` and what steps resolve (:func:`curve_budget`, :func:`checked_lr`,
  :func:`lr_check_tasks`, :func:`suite_row`)
- ``executors`` — who runs the steps (``local``, ``processes``, ``ray``), their dependency graph, the progress display
- ``plan`` — ``talos suite NAME --plan``: what a run would do and cost, offline
- ``run`` — :func:`run_suite` and its :class:`SuiteRunOptions`: checks, the suite record, sessions and ``--resume``,
  ``--stage train``
- ``report`` — :func:`results_markdown` and :func:`report_markdown` (``talos report``)

This module re-exports the public names of ``specs``, ``steps``, ``run`` and ``report``; ``executors``, ``plan``
and ``costs`` are imported by their own names. To replace a function for a test, patch it where it is looked up
(e.g. ``talos_core.suites.run._run_suite``), not here.
"""

from talos_core.suites.report import markdown_text, report_markdown, results_markdown
from talos_core.suites.run import STAGES, ExecutorOptions, SuiteRunOptions, run_suite
from talos_core.suites.specs import SUITES, Scale, SuiteSpec, default_scale, get_suite, register_suite, with_model
from talos_core.suites.steps import (
    Resolved,
    Step,
    SuiteRow,
    checked_lr,
    curve_budget,
    lr_check_tasks,
    suite_row,
    suite_steps,
)

__all__ = ["SUITES", "STAGES", "ExecutorOptions", "Resolved", "Scale", "Step", "SuiteRow", "SuiteRunOptions",
           "SuiteSpec", "checked_lr", "curve_budget", "default_scale", "get_suite", "lr_check_tasks",
           "markdown_text", "register_suite", "report_markdown", "results_markdown", "run_suite", "suite_row",
           "suite_steps", "with_model"]
