"""Reporting: documents and findings as text a person reads (the job summary, compare and change
reports, the tables they share, the primary candidate they lead with) and the exports."""
