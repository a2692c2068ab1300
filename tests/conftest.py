"""Shared fixtures. Kept free of aws_cdk and moto imports: tests/spark also runs in the Spark 3.3 venv."""
