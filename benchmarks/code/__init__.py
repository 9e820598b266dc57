"""Measurements of the code itself rather than of training: the package's shape at a commit."""
