{
  "targets": [
    {
      "target_name": "lamer_blas",
      "sources": ["blas.c"],
      "libraries": ["-lopenblas"],
      "cflags": ["-O2", "-Wall"]
    }
  ]
}
