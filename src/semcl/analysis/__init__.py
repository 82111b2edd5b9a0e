"""Analytic studies that need no training runs (e.g. RINCE's gradient equilibrium, Fig. 4/5)."""
