"""Model families by config.json ``model_type``: one record each (``table``), the fields every
family understands (``understood``), and the readers that turn fields into layers: the standard
decoder (``decoder``, ``layouts``), attention geometry (``attention``) and recurrent states
(``recurrent``). docs/families.md explains the rules and how to add a family."""
