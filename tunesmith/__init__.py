"""tunesmith: adapters for generative audio and image models, trained from a folder of media.

The engine lives here and never imports Dagster; `assets/` and `pipelines/` wrap it.
"""

__version__ = "0.1.0"
