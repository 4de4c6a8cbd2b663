// MathJax 2.7 (served from the site, copied from the jupyter-server-mathjax wheel at build time):
// its combined TeX-AMS-MML_HTMLorMML-full configuration, HTML-CSS output with the STIX-Web fonts
// the wheel ships. It typesets \\(...\\) and \\[...\\] (what pymdownx.arithmatex
// writes) outside code; the rendered notebooks' own configuration adds $...$ on their pages.
window.MathJax = {
  "HTML-CSS": {
    availableFonts: ["STIX-Web"], preferredFont: "STIX-Web", webFont: "STIX-Web", imageFont: null,
    // MathJax's placeholder face points at about:blank, which browsers report as a failed load
    styles: { "@font-face": { "font-family": "MathJax_Blank", src: "local('MathJax_Blank')" } },
  },
  // the wheel has no calligraphic/script faces for STIX-Web's HTML-CSS output (a 404 otherwise);
  // nor the AMS double-struck face: \mathbb (the docstrings' expectations) is set upright
  TeX: { Macros: { mathcal: ["\\mathit{#1}", 1], mathscr: ["\\mathit{#1}", 1], mathbb: ["\\mathrm{#1}", 1] } },
  tex2jax: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  showMathMenu: false,
  messageStyle: "none",
};
