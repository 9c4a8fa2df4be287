package storetest_test

// The tests read datasets from S3, GCS and Azure on loopback; source.Open
// reaches them through package bucket, which a program that reads object
// stores imports (stoker's server does).
import _ "github.com/stoker-dev/stoker/pipeline/source/bucket"
