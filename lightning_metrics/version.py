"""The framework version, recorded in every signature, export and model card."""

__version__ = "0.2.0"
