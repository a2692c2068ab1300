"""Streaming ETL job code. Importable without aws_cdk; awsglue is imported only inside Glue."""
