// llmload: added to Locust's own page (index.html). Locust's "Edit running load test" dialog closes on submit
// whatever the answer, so a refused edit (POST /swarm answered {success: false, running: true, message}) would
// only be in the log. This shows the answer's one line in a banner at the top of Locust's page.
(function () {
  "use strict";
  const origFetch = window.fetch.bind(window);
  function banner(message) {
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
  }
  window.fetch = async function (input, init) {
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
