"""Launchers: where publisher jobs run (local spark-submit, EMR Serverless)."""
