"""Task registrations (placeholder until tasks exist)."""
