"""Analysis: read tracked runs back from MLflow and regenerate the papers' tables and figures
(DESIGN.md, layer 3)."""
