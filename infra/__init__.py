"""CDK infrastructure for the streaming lake: one construct per concern, composed in stack.py."""
