"""``nico demo``: a simulated GB200 site with the API and the reconciler, on one laptop."""
