"""The model families, one package each (`tunesmith/families/<name>/`).

The interface they implement and the registry that finds them live one layer below the
training code, in `tunesmith/family.py`; this package holds the families alone.
"""
