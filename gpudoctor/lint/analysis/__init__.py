"""The analysis core: parse once, interpret statements in order, produce event flows."""
