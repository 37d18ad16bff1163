"""Moved here from the flat pipeline/ (see the following commits for its contract)."""
