// index ops: validation (filled in by issue 4).
