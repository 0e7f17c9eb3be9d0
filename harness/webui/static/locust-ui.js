// llmload: added to Locust's own page (index.html).
// 1. Locust's "Edit running load test" dialog closes on submit whatever the answer, so a refused edit (POST /swarm
//    answered {success: false, running: true, message}) would only be in the log. This shows the answer's one
//    line in a banner at the top of Locust's page.
// 2. The start form shows what runs: when the profile picker (web_profile) or the Profile path field changes,
//    every profile field is filled with that profile's resolved values (GET <base>/llmload/form.json); a field
//    changed afterwards overrides the profile, and so does a field typed while that profile's values were still
//    loading (they never overwrite a field typed in under the same profile). A profile that cannot be loaded is
//    named in the banner.
// 3. Sweep mode hides the fields it does not use (Number of users, Ramp up); fixed mode shows them.
(function () {
  "use strict";
  const origFetch = window.fetch.bind(window);
  const script = document.currentScript;
  const base = script && script.src ? script.src.replace(/\/llm\/static\/locust-ui\.js(\?.*)?$/, "") : "";
  //: the fields a profile fills (argparse dests of harness/locust/form.py's KNOBS), in form order
  const KNOBS = ["prompt_mix", "prompts_file", "max_tokens", "thinking", "steps", "step_duration"];
  //: Locust's form names its fields in camelCase (prompt_mix -> promptMix) and sends them back in snake_case
  const camel = (dest) => dest.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
  const field = (form, dest) => form.querySelector(`[name="${camel(dest)}"]`);
  //: Locust's fields that sweep mode does not use
  const SWEEP_HIDDEN = ["userCount", "spawnRate"];
  function banner(message, source) {
    let box = document.getElementById("llmload-refused");
    if (!box) {
      box = document.createElement("div");
      box.id = "llmload-refused";
      box.setAttribute("role", "alert");
      box.style.cssText = "position:fixed;top:0;left:0;right:0;z-index:100000;padding:10px 40px 10px 16px;" +
        "background:#b71c1c;color:#fff;font:14px/1.4 sans-serif;box-shadow:0 2px 6px rgba(0,0,0,.4)";
      const text = document.createElement("span");
      text.className = "llmload-refused-text";
      const close = document.createElement("button");
      close.type = "button";
      close.textContent = "×";
      close.setAttribute("aria-label", "dismiss");
      close.style.cssText = "position:absolute;right:10px;top:6px;background:none;border:0;color:#fff;font-size:18px;cursor:pointer";
      close.addEventListener("click", () => box.remove());
      box.append(text, close);
      document.body.appendChild(box);
    }
    box.querySelector(".llmload-refused-text").textContent = message;
    box.dataset.source = source || "swarm";
  }
  function startForm() {
    for (const f of document.querySelectorAll("form")) if (f.querySelector('[name="webProfile"]')) return f;
    return null;
  }
  function setValue(el, value) {  // a React field: the native setter, then the events React listens to
    const proto = el.tagName === "SELECT" ? window.HTMLSelectElement.prototype
      : el.tagName === "TEXTAREA" ? window.HTMLTextAreaElement.prototype : window.HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(proto, "value").set.call(el, value);
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  }
  function fill(form, values, placeholders, key) {
    for (const dest of KNOBS) {
      const el = field(form, dest);
      if (!el) continue;
      if (dest in values && edited.get(dest) !== key && el.value !== values[dest]) setValue(el, values[dest]);
      if (el.tagName === "INPUT") el.placeholder = (placeholders || {})[dest] || "";
    }
  }
  function toggleSweep(form) {
    const mode = field(form, "mode");
    const sweep = !mode || mode.value !== "fixed";
    for (const name of SWEEP_HIDDEN) {
      const el = form.querySelector(`[name="${name}"]`);
      if (!el) continue;
      const box = el.closest(".MuiFormControl-root") || el.parentElement;
      // hidden: never an empty required field blocking Start, nor a value the server refuses
      if (sweep && !/^[1-9][0-9]*$/.test(el.value)) setValue(el, "1");
      box.style.display = sweep ? "none" : "";
      box.dataset.llmloadHidden = sweep ? "sweep" : "";
    }
  }
  // lastKey: the profile (picker + typed path) last seen; filledKey: the profile whose values the fields show
  let lastKey = null, filledKey = null, pending = null, filling = false;
  // edited: profile field -> the profile (key) it was typed in under. A profile's values arriving later never
  // overwrite a field typed in under that same profile (the user's value wins, as it does once the fields are
  // filled); picking another profile fills every field with that profile's values.
  const edited = new Map();
  document.addEventListener("input", (ev) => {
    if (filling || !ev.isTrusted) return;  // our own fill
    const name = ev.target && ev.target.name;
    const dest = KNOBS.find((d) => camel(d) === name);
    const form = startForm();
    if (dest && form) edited.set(dest, keyOf(form).join("\n"));
  }, true);
  const keyOf = (form) => [(field(form, "web_profile") || {}).value || "",
    (form.querySelector('[name="profile"]') || {}).value || ""];
  async function load(form, key, picked, typed) {
    const q = new URLSearchParams({ web_profile: picked, profile: typed });
    try {
      const resp = await origFetch(`${base}/llmload/form.json?${q}`, { credentials: "same-origin" });
      const data = await resp.json();
      if (key !== lastKey) return;  // changed again meanwhile
      if (data.error) { banner(data.error, "form"); return; }
      const box = document.getElementById("llmload-refused");
      if (box && box.dataset.source === "form") box.remove();  // a profile that loads clears its earlier error
      filling = true;
      fill(form, data.values || {}, data.placeholders, key);
      filledKey = key;
      document.body.dataset.llmloadFormProfile = data.profile || "";
      document.body.dataset.llmloadFormKey = key;
    } catch (e) { /* never break Locust's UI */ } finally { filling = false; }
  }
  function watch() {
    const form = startForm();
    if (!form) { lastKey = filledKey = null; return; }
    toggleSweep(form);
    if (filling) return;
    const [picked, typed] = keyOf(form);
    const key = picked + "\n" + typed;
    if (key === lastKey) return;
    if (lastKey === null) {  // the form as Locust drew it: the launch profile's values (and its placeholders)
      lastKey = filledKey = key;
      load(form, key, picked, typed);
      return;
    }
    lastKey = key;
    clearTimeout(pending);
    pending = setTimeout(() => load(form, key, picked, typed), 400);  // a typed path: once typing pauses
  }
  setInterval(watch, 200);
  // A Start pressed before the picked profile's values were filled in: fill them first and send them, and tell
  // the server which profile the fields showed (llmload_shown), so it reads the fields against that profile's
  // values (harness/locust/webrun.py) and never runs values the form did not show.
  async function startRequest(input) {
    const form = startForm();
    if (!form || !(input instanceof Request)) return input;
    const [picked, typed] = keyOf(form);
    const key = picked + "\n" + typed;
    if (filledKey !== null && key !== filledKey) {
      clearTimeout(pending);
      lastKey = key;
      await load(form, key, picked, typed);
    }
    const params = new URLSearchParams(await input.clone().text());
    if (filledKey === key) for (const dest of KNOBS) {
      const el = field(form, dest);
      if (el && params.has(dest)) params.set(dest, el.value);
    }
    if (filledKey !== null) params.set("llmload_shown", filledKey);
    return new Request(input.url, { method: "POST", headers: input.headers, body: params.toString(),
      credentials: input.credentials, signal: input.signal });
  }
  window.fetch = async function (input, init) {
    const url0 = typeof input === "string" ? input : (input && input.url) || "";
    const method0 = ((init && init.method) || (input && input.method) || "GET").toUpperCase();
    if (method0 === "POST" && /\/swarm\/?(\?|$)/.test(url0)) {
      try { input = await startRequest(input); } catch (e) { /* never break Locust's UI */ }
    }
    const resp = await origFetch(input, init);
    try {
      const url = typeof input === "string" ? input : (input && input.url) || "";
      const method = ((init && init.method) || (input && input.method) || "GET").toUpperCase();
      if (method === "POST" && /\/swarm\/?(\?|$)/.test(url)) {
        const data = await resp.clone().json();
        if (data && data.success === false && data.running) banner(data.message || "llmload: edit refused");
      }
    } catch (e) { /* never break Locust's UI */ }
    return resp;
  };
})();
