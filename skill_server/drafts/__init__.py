"""Drafted cards: ledger records -> a card skeleton a person finishes and promotes."""
