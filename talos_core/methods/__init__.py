"""Methods, as data: one declaration per method (:mod:`talos_core.methods.declaration`), listed in the registry
:data:`talos_core.methods.registry.DECLARATIONS` from which the catalogue :data:`talos_core.schema.METHODS` is
derived, and the post-hoc merges' tensor functions.

The fine-tuning methods are declared in :mod:`talos_core.methods.finetuning`; their runners (which train, and so
sit above the training loop) are in :mod:`talos_core.runners`, named by each declaration as ``"module:function"``.
Each post-hoc merge is one file (:mod:`talos_core.methods.ties`, ``dare``, ``breadcrumbs``, ``tall``, ``tsv``,
``iso``, ``lines``, ``della``) over the tensor functions of :mod:`talos_core.methods.taskvec`,
:mod:`~talos_core.methods.sparsify` and :mod:`~talos_core.methods.spectral`; :mod:`talos_core.methods.merging` is
their registry view and :mod:`talos_core.methods.posthoc` applies one to task vectors.

Nothing here imports the training stack, the store's format or anything above them: the declarations and the
registry are torch-free (the schema lists them), the merge functions need torch and the task-vector type only.
"""
