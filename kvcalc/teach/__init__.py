"""Teaching content computed by the layers below: interview and practice questions with their
grader, the guided tour, the shrinking techniques, the cache-fill timeline."""
