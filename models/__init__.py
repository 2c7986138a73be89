"""The zoo's models, one module or folder per paper. Importing the package
imports every family, which registers its models (`models.registry`),
and the ensemble of trained runs of any of them (`models.ensemble`)."""

from models import ensemble, fisher_vectors, fne_pipelines, mcnn, rcn, vse, w2vv  # noqa: F401
