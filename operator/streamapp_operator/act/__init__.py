"""Carry out a Plan: idempotent creates (409 = already there), merge patches, fenced driver changes."""
