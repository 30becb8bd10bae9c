// The console's neighbourhood view (automem/gateway/console/templates/graph.html): draws the
// nodes and edges the page embeds as JSON with cytoscape.js (vendored, see NOTICE.md).
document.addEventListener("DOMContentLoaded", function () {
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var elements = data.nodes.map(function (n) { return { data: n }; }).concat(
    data.edges.map(function (e) { return { data: e }; }));
  var cy = cytoscape({
    container: document.getElementById("graph"),
    elements: elements,
    wheelSensitivity: 0.3,
    maxZoom: 1.3,  // a small neighbourhood is not blown up to fill the canvas
    style: [
      { selector: "node", style: { "background-color": "data(color)", label: "data(label)", "font-size": 10,
        "text-wrap": "ellipsis", "text-max-width": 150, width: 22, height: 22, color: "#1f2937",
        "text-valign": "bottom", "text-margin-y": 4 } },
      { selector: "node[role = 'center']", style: { width: 34, height: 34, "border-width": 3, "border-color": "#0f172a" } },
      { selector: "node[style = 'superseded']", style: { opacity: 0.45, "border-width": 2, "border-style": "dashed",
        "border-color": "#6b7280", "background-color": "#ffffff" } },
      { selector: "node[style = 'not_current']", style: { opacity: 0.45, "border-width": 2, "border-style": "dotted",
        "border-color": "#6b7280", "background-color": "#ffffff" } },
      { selector: "node[role = 'entity']", style: { shape: "round-rectangle", width: 16, height: 16, "font-size": 9 } },
      { selector: "edge", style: { width: 2, "line-color": "data(color)", "target-arrow-color": "data(color)",
        "target-arrow-shape": "triangle", "curve-style": "bezier", label: "data(type)", "font-size": 8,
        "text-rotation": "autorotate", color: "#475569" } },
      { selector: "edge[type = 'MENTIONS']", style: { "line-style": "dashed", width: 1, label: "" } },
      { selector: "edge[?semantic]", style: { "line-style": "dotted", "target-arrow-shape": "none" } }
    ],
    // Rings: the memory in the middle, its memory neighbours around it, the entities outside.
    layout: { name: "concentric", animate: false, padding: 40, minNodeSpacing: 70, levelWidth: function () { return 1; },
      concentric: function (node) { return { center: 3, entity: 1 }[node.data("role")] || 2; } }
  });
  cy.on("tap", "node", function (evt) {
    var node = evt.target.data();
    if (node.role !== "entity" && node.role !== "center") {
      window.location.href = "/console/memories/" + encodeURIComponent(node.id) + "/graph";
    }
  });
  document.getElementById("graph").dataset.ready = String(cy.nodes().length);
});
