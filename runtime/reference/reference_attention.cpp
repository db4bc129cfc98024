// attention ops: CPU reference (filled in by issue 4).
