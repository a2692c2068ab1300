"""Code that runs in AWS Lambda, one folder per function (each folder is the function's asset: standard library
and the runtime's boto3 only)."""
