"""Compile a resolved StreamApp into DataFrames: sources, steps, tables (no query is started here)."""
