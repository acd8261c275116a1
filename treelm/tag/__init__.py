"""Slot filling at inference time: ``treelm tag`` (verb in :mod:`treelm.tag.commands`)."""
