"""The results ledger: records with evidence levels, backends (SQLite, PostgreSQL), signing, export."""
