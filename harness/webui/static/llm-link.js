// llmload: added to Locust's own page (index.html). Locust's extended tables render every cell as text, so the
// "LLM view" named in the last row of its LLM tab is made a link to the view here (the URL is this script's
// data-href, set by harness.webui.routes).
(function () {
  "use strict";
  const href = document.currentScript && document.currentScript.dataset.href;
  const NAME = "LLM view";
  if (!href) return;
  function linkify(root) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const hits = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.nodeValue.includes(NAME) && n.parentElement && !n.parentElement.closest("a") &&
          n.parentElement.closest("td")) hits.push(n);
    }
    for (const n of hits) {
      const i = n.nodeValue.indexOf(NAME);
      const after = n.splitText(i);
      after.splitText(NAME.length);
      const a = document.createElement("a");
      a.href = href;
      a.className = "llmload-view-link";
      a.textContent = NAME;
      after.replaceWith(a);
    }
  }
  new MutationObserver(() => linkify(document.body)).observe(document.body, { childList: true, subtree: true,
                                                                            characterData: true });
  linkify(document.body);
})();
