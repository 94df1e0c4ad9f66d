#!/usr/bin/python3
"""peer.py: an independent S3 client (boto3) for tests/s3_client.c, which
checks its reads against objects this script wrote and its writes with
this script's reads. It takes the endpoint, keys and region from the
environment that tests/s3/run.sh exports (AWS_ENDPOINT_URL and kin) and
addresses buckets path-style, as the C client does.

  peer.py put BUCKET KEY FILE       upload FILE (multipart above 8 MiB)
  peer.py get BUCKET KEY FILE       download KEY to FILE
  peer.py delete BUCKET KEY         delete KEY
  peer.py many BUCKET PREFIX N      N small objects PREFIXi (16 threads)
  peer.py uploads BUCKET KEY        print the multipart uploads of KEY in progress
  peer.py mkbucket BUCKET           create BUCKET if it is missing
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=16,
                      retries={"max_attempts": 3}),
    )


def main(argv):
    cmd, bucket = argv[1], argv[2]
    s3 = client()
    if cmd == "put":
        s3.upload_file(argv[4], bucket, argv[3])
    elif cmd == "get":
        s3.download_file(bucket, argv[3], argv[4])
    elif cmd == "delete":
        s3.delete_object(Bucket=bucket, Key=argv[3])
    elif cmd == "many":
        prefix, n = argv[3], int(argv[4])
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: s3.put_object(Bucket=bucket, Key=f"{prefix}{i}",
                                                  Body=f"object {i}".encode()), range(n)))
    elif cmd == "uploads":
        ups = s3.list_multipart_uploads(Bucket=bucket, Prefix=argv[3]).get("Uploads", [])
        print(len([u for u in ups if u["Key"] == argv[3]]))
    elif cmd == "mkbucket":
        try:
            s3.head_bucket(Bucket=bucket)
        except Exception:
            s3.create_bucket(Bucket=bucket)
    else:
        sys.exit(f"peer.py: unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
