"""semcl: reproduce the tables of papers on semantic structure in contrastive learning."""

__version__ = "0.1.0"
