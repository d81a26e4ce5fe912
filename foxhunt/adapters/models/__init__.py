"""Where trained models are kept: a local directory or an S3 bucket (store.py)."""
