"""Deliberate breakage by hand: see __main__.py."""
