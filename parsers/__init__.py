"""Readers for every artifact a bundle can hold, and the correlation that turns them into a verdict.

Nothing here runs a process or touches a live target: it only reads files and data.
"""
