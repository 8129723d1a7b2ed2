"""Pure-Python trainers and the simulator; never imports Django."""
