package main

import "github.com/aws/aws-sdk-go-v2/service/dynamodb"

type dynamoClient = dynamodb.Client
