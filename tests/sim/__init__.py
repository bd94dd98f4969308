"""Deterministic simulation of the actor layer (issue 6, item 3): see harness.py."""
