"""`python -m warren_spark_kernel -f CONNECTION_FILE`: what the kernelspec starts."""

from .kernel import WarrenSparkKernel

if __name__ == "__main__":
    WarrenSparkKernel.run_as_main()
