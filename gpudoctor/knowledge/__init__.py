"""Framework facts read at run time by the probe (see DESIGN.md, "Direction")."""
