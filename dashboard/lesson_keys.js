// The lesson page's keyboard: → and PageDown press its forward button, ← and PageUp its back button (what
// presentation clickers send). Mounted by dashboard/lesson_keys.py (st.components.v2: no iframe, nothing fetched).
// One listener per browser tab, kept across reruns; it finds the buttons by their Streamlit key class each time, so
// on another page (no such buttons) a key does what it always does. Keys typed into a field or a slider, held down
// (repeats) or pressed with a modifier are left alone.

const KEYS = { ArrowRight: 'forward', PageDown: 'forward', ArrowLeft: 'back', PageUp: 'back' };
const REG = (globalThis.__talosLessonKeys = globalThis.__talosLessonKeys || { buttons: null, listener: null });

function typing(el) {
  if (!el || !el.tagName) return false;
  if (el.isContentEditable || el.tagName === 'TEXTAREA' || el.tagName === 'SELECT') return true;
  if (el.getAttribute && el.getAttribute('role') === 'slider') return true;
  return el.tagName === 'INPUT' && !['button', 'checkbox', 'radio', 'submit', 'reset'].includes(el.type);
}

function onKey(e) {
  const which = KEYS[e.key];
  if (!which || !REG.buttons || e.repeat || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey || e.isComposing) return;
  if (typing(e.target)) return;
  const button = document.querySelector(`.st-key-${REG.buttons[which]} button`);
  if (!button) return;  // not on the lesson page
  e.preventDefault();  // a PageDown must not scroll the page as well
  if (!button.disabled) button.click();
}

export default function (component) {
  const { data, parentElement } = component;
  REG.buttons = data && data.buttons ? data.buttons : null;
  if (!REG.listener) {
    REG.listener = onKey;
    document.addEventListener('keydown', onKey);
  }
  if (!parentElement.querySelector('[data-talos-lesson-keys]')) {  // the page state browser tests wait on
    const mark = document.createElement('div');
    mark.dataset.talosLessonKeys = 'on';
    parentElement.appendChild(mark);
  }
  return undefined;
}
