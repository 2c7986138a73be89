"""The zoo's models, one module or folder per paper, and the ensemble of
trained runs of any of them (`models.ensemble`). Each family's module
registers its models when imported; `models.registry` imports a family
when one of its models is first asked for, so the package itself imports
none (nor TensorFlow)."""
