"""The ``conveyor.v1`` wire contract: .proto files and the code ``make proto`` generates from them."""
