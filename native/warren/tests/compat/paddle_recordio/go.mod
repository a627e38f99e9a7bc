module warren.dev/compat/paddle_recordio

go 1.21

require github.com/golang/snappy v1.0.0
