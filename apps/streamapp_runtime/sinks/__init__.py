"""Sinks: each turns a Frame into a started streaming query."""
