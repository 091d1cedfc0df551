"""``nico demo``: a simulated GB200 or GB300 site with the API and the reconciler, on one laptop."""
