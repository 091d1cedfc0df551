"""The label sync (``nico label-sync``): Kubernetes Node labels kept equal to nico's placement export,
through the Kubernetes API, touching only the labels it set itself (kube: the API calls; plan: the
pure diff into merge patches; sync: one pass and the stored stream cursor)."""
