//! The collector answers like InfluxDB 1.x and stores what it stores.
//!
//! Every case — the inputs of InfluxDB's own line-protocol parser tests (`models/points_test.go`
//! of influxdata/influxdb: the facts, restated here), the cases of the collector issue, and
//! probes of 1.6's storage rules — is written twice: straight to a real influxd (database
//! `direct`) and through the collector (1.x output, database `via`). The two answers must have
//! the same status, the collector's must name the refused lines, and afterwards both databases
//! must hold the same series, field types and values, and no line may have ended in the
//! collector's dead-letter file (acknowledged, then refused by influxd).
//!
//! Cases writing the measurement `cpu` get a measurement of their own (`cpu<N>`), so that one
//! case's field types do not decide another's. Before the cases, a point is written to both
//! databases at every timestamp a case uses: influxd 1.6 validates the first write into a new
//! shard differently (a type conflict between two lines of that write refuses the whole write).
//! Points written without a timestamp are compared without their time (each path stamps its
//! own receive time).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use storwatch_test_support::{http, now_s, post_form, wait_for, Collector, Influxd};
use storwatch_wire::lp::{check_line, lines, Backends, Checked, LineLimits, Precision};

const INFLUX_PORT: u16 = 18700;
const COLLECTOR_PORT: u16 = 18710;

/// One write: a name saying where it comes from, the precision parameter, the body.
struct Case {
    name: &'static str,
    precision: Option<&'static str>,
    body: String,
}

fn case(name: &'static str, body: &str) -> Case {
    Case {
        name,
        precision: None,
        body: body.to_string(),
    }
}

fn case_p(name: &'static str, precision: &'static str, body: &str) -> Case {
    Case {
        name,
        precision: Some(precision),
        body: body.to_string(),
    }
}

/// The inputs of influxdata/influxdb `models/points_test.go`, each a fact about what InfluxDB's
/// parser accepts or refuses.
fn parser_test_cases() -> Vec<Case> {
    let max_float = format!("{:.1}", f64::MAX);
    let mut v = vec![
        // TestPoint_Tags
        case("Tags none", "cpu value=1"),
        case("Tags one", "cpu,tag0=v0 value=1"),
        case("Tags two", "cpu,tag0=v0,tag1=v0 value=1"),
        case("Tags escaped space", r"cpu,tag0=v\ 0 value=1"),
        case("Tags escaped spaces", r"cpu,tag0=v\ 0\ 1,tag1=v2 value=1"),
        case("Tags escaped comma", r"cpu,tag0=\, value=1"),
        case("Tags escaped space key", r"cpu,ta\ g0=\, value=1"),
        case("Tags comma value", r"cpu,tag0=\,1 value=1"),
        case("Tags escaped quotes", r#"cpu,tag0=1\"\",t=k value=1"#),
        case("Tags reserved _measurement", "cpu,_measurement=v0,tag0=v0 value=1"),
        case("Tags reserved _measurement unsorted", "cpu,tag0=v0,_measurement=v0 value=1"),
        case("Tags reserved _field", "cpu,tag0=v0,_field=v0 value=1"),
        case("Tags reserved time", "cpu,tag0=v0,time=v0 value=1"),
        // TestPoint_Nulls
        case("Nulls plain", "cpu,tag1=v0 value=1"),
        case("Nulls in tag key", "cpu,tag\x001=v0 value=1"),
        case("Nulls tag value", "cpu,tag0=\x00,tag1=v0 value=1"),
        case("Nulls in field key", "cpu,tag0=v0 val\x00ue=1"),
        case("Nulls field value", "cpu,tag0=v0,tag1=v0 value=\x00"),
        case("Nulls leading", "\x00,tag0=v0,tag1=v0 value=1"),
        // TestPoint_EqPattern_Measurement
        case("EqPattern plain", "cpu value=1"),
        case("EqPattern tags", "cpu,tag0=v0 value=1"),
        case("EqPattern measurement=withEq", "measurement=withEq,tag0=v0 value=1"),
        case("EqPattern tag0=v0 measurement", "tag0=v0 value=1"),
        // TestParsePointNoValue, WhitespaceValue
        case("NoValue", ""),
        case("WhitespaceValue", " "),
        // TestParsePointNoFields
        case("NoFields tags", "cpu_load_short,host=server01,region=us-west"),
        case("NoFields bare", "cpu"),
        case("NoFields empty tag", "cpu,host=="),
        case("NoFields equals", "="),
        // TestParsePointNoTimestamp
        case("NoTimestamp", "cpu value=1"),
        // TestParsePointMissingQuote
        case("MissingQuote open", r#"cpu,host=serverA value="test"#),
        case("MissingQuote extra", r#"cpu,host=serverA value="test"""#),
        // TestParsePointMissingTagKey
        case("MissingTagKey space", "cpu, value=1"),
        case("MissingTagKey trailing comma", "cpu,"),
        case("MissingTagKey commas", "cpu,,,"),
        case("MissingTagKey empty", "cpu,host=serverA,=us-east value=1i"),
        case("MissingTagKey escaped comma value", r"cpu,host=serverAa\,,=us-east value=1i"),
        case("MissingTagKey escaped comma", r"cpu,host=serverA\,,=us-east value=1i"),
        case("MissingTagKey space key", "cpu, =serverA value=1i"),
        case("MissingTagKey escaped space key ok", r"cpu,host=serverA,\ =us-east value=1i"),
        // TestParsePointMissingTagValue
        case("MissingTagValue bare", "cpu,host"),
        case("MissingTagValue comma", "cpu,host,"),
        case("MissingTagValue equals", "cpu,host="),
        case("MissingTagValue field", "cpu,host value=1i"),
        case("MissingTagValue second", "cpu,host=serverA,region value=1i"),
        case("MissingTagValue second equals", "cpu,host=serverA,region= value=1i"),
        case("MissingTagValue middle", "cpu,host=serverA,region=,zone=us-west value=1i"),
        // TestParsePointInvalidTagFormat
        case("InvalidTagFormat", "cpu,host=f=o,"),
        case("InvalidTagFormat escaped", r"cpu,host=f\==o,"),
        // TestParsePointMissingFieldName
        case("MissingFieldName equals", "cpu,host=serverA,region=us-west ="),
        case("MissingFieldName value", "cpu,host=serverA,region=us-west =123i"),
        case("MissingFieldName escaped space ok", r"cpu,host=serverA,region=us-west a\ =123i"),
        case("MissingFieldName second", "cpu,host=serverA,region=us-west value=123i,=456i"),
        // TestParsePointMissingFieldValue
        case("MissingFieldValue end", "cpu,host=serverA,region=us-west value="),
        case("MissingFieldValue space", "cpu,host=serverA,region=us-west value= 1000000000i"),
        case("MissingFieldValue comma", "cpu,host=serverA,region=us-west value=,value2=1i"),
        case("MissingFieldValue timestamp only", "cpu,host=server01,region=us-west 1434055562000000000i"),
        case("MissingFieldValue bare key", "cpu,host=server01,region=us-west value=1i,b"),
        case("MissingFieldValue after string", r#"m f="blah"=123,r 1531703600000000000"#),
        // TestParsePointBadNumber
        case("BadNumber minus", "cpu v=- "),
        case("BadNumber minus i", "cpu v=-i "),
        case("BadNumber minus dot", "cpu v=-. "),
        case("BadNumber dot", "cpu v=. "),
        case("BadNumber float i", "cpu v=1.0i "),
        case("BadNumber ii", "cpu v=1ii "),
        case("BadNumber 1a", "cpu v=1a "),
        case("BadNumber e-e-e", "cpu v=-e-e-e "),
        case("BadNumber 42+3", "cpu v=42+3 "),
        case("BadNumber empty", "cpu v= "),
        case("BadNumber -123u", "cpu v=-123u"),
        // TestParsePointMaxInt64 / MinInt64
        case("MaxInt64 out of range", "cpu,host=serverA,region=us-west value=9223372036854775808i"),
        case("MaxInt64", "cpu,host=serverA,region=us-west value=9223372036854775807i"),
        case("MaxInt64 leading zeros", "cpu,host=serverA,region=us-west value=0009223372036854775807i"),
        case("MinInt64 out of range", "cpu,host=serverA,region=us-west value=-9223372036854775809i"),
        case("MinInt64", "cpu,host=serverA,region=us-west value=-9223372036854775808i"),
        case("MinInt64 leading zeros", "cpu,host=serverA,region=us-west value=-0009223372036854775808i"),
        // TestParsePointMaxUint64 / MinUint64 (no unsigned type in 1.x)
        case("MaxUint64 out of range", "cpu,host=serverA,region=us-west value=18446744073709551616u"),
        case("MaxUint64", "cpu,host=serverA,region=us-west value=18446744073709551615u"),
        case("MaxUint64 leading zeros", "cpu,host=serverA,region=us-west value=00018446744073709551615u"),
        case("MinUint64 --1u", "cpu,host=serverA,region=us-west value=--1u"),
        case("MinUint64 0u", "cpu,host=serverA,region=us-west value=0u"),
        case("MinUint64 0000u", "cpu,host=serverA,region=us-west value=0000u"),
        // number shapes
        case("NumberNonNumeric", "cpu,host=serverA,region=us-west value=.1a"),
        case("NegativeWrongPlace", "cpu,host=serverA,region=us-west value=0.-1"),
        case("OnlyNegativeSign", "cpu,host=serverA,region=us-west value=-"),
        case("FloatMultipleDecimals", "cpu,host=serverA,region=us-west value=1.1.1"),
        case("Integer", "cpu,host=serverA,region=us-west value=1i"),
        case("NegativeInteger", "cpu,host=serverA,region=us-west value=-1i"),
        case("NegativeFloat", "cpu,host=serverA,region=us-west value=-1.0"),
        case("FloatNoLeadingDigit", "cpu,host=serverA,region=us-west value=.1"),
        case("FloatScientific", "cpu,host=serverA,region=us-west value=1.0e4"),
        case("FloatScientific short", "cpu,host=serverA,region=us-west value=1e4"),
        case("FloatScientificUpper", "cpu,host=serverA,region=us-west value=1.0E4"),
        case("FloatScientificUpper short", "cpu,host=serverA,region=us-west value=1E4"),
        case("FloatScientificDecimal", "cpu,host=serverA,region=us-west value=1.0e-4"),
        case("FloatNegativeScientific", "cpu,host=serverA,region=us-west value=-1.0e-4"),
        case("BooleanInvalid", "cpu,host=serverA,region=us-west value=a"),
        case("ScientificIntInvalid 9ie10", "cpu,host=serverA,region=us-west value=9ie10"),
        case("ScientificIntInvalid 9e10i", "cpu,host=serverA,region=us-west value=9e10i"),
        // TestParsePointWhitespace
        case("Whitespace after measurement", "cpu    value=1.0 1257894000000000000"),
        case("Whitespace before timestamp", "cpu value=1.0     1257894000000000000"),
        case("Whitespace both", "cpu      value=1.0     1257894000000000000"),
        case("Whitespace trailing", "cpu value=1.0 1257894000000000000   "),
        case("Whitespace newline", "cpu value=1.0 1257894000000000000\n"),
        case("Whitespace spaces and newline", "cpu   value=1.0 1257894000000000000\n"),
        // TestParsePointUnescape
        case("Unescape comma in measurement", r"foo\,bar value=1i"),
        case("Unescape comma in measurement with tags", r"cpu\,main,regions=east value=1.0"),
        case("Unescape space in measurement", r"cpu\ load,region=east value=1.0"),
        case("Unescape escaped equals in measurement", r"cpu\=load,region=east value=1.0"),
        case("Unescape equals in measurement", "cpu=load,region=east value=1.0"),
        case("Unescape comma in tag key", r"cpu,region\,zone=east value=1.0"),
        case("Unescape space in tag key", r"cpu,region\ zone=east value=1.0"),
        case("Unescape backslash and equals in tag key", r"cpu,reg\\=ion=east value=1.0"),
        case("Unescape space tag key", r"cpu,\ =east value=1.0"),
        case("Unescape comma in tag value", r"cpu,regions=east\,west value=1.0"),
        case("Unescape backslash then space", r"cpu,regions=\\ east value=1.0"),
        case("Unescape backslash inside", r"cpu,regions=eas\\ t value=1.0"),
        case("Unescape backslash trailing space", r"cpu,regions=east\\  value=1.0"),
        case("Unescape space in tag value", r"cpu,regions=east\ west value=1.0"),
        case("Unescape comma in field key", r"cpu,regions=east value\,ms=1.0"),
        case("Unescape space in field key", r"cpu,regions=east value\ ms=1.0"),
        case("Unescape string field", r#"cpu,regions=east value="1""#),
        case("Unescape comma in string", r#"cpu,regions=east value="1,0""#),
        case("Unescape random escape", r"cpu,regions=eas\t value=1.0"),
        case("Unescape backslash then escapes", r"cpu,regions=\\,\,\=east value=1.0"),
        case("Unescape field key escape char", r"cpu \a=1i"),
        case("Unescape equals everywhere", r"cpu=load,equals\=foo=tag\=value value=1i"),
        // tags
        case("WithTags", "cpu,host=serverA,region=us-east value=1.0 1000000000"),
        case("DuplicateTags", "cpu,host=serverA,host=serverB value=1i 1000000000"),
        case("DuplicateTags unsorted", "cpu,b=2,b=1,c=3 value=1i 1000000000"),
        case("DuplicateTags apart", "cpu,b=2,c=3,b=1 value=1i 1000000000"),
        // strings
        case("StringField", r#"cpu,host=serverA,region=us-east value=1.0,str="foo",str2="bar" 1000000000"#),
        case("StringField escaped quote", r#"cpu,host=serverA,region=us-east str="foo \" bar" 1000000000"#),
        case("StringWithSpaces", r#"cpu,host=serverA,region=us-east value=1.0,str="foo bar" 1000000000"#),
        case("StringWithNewline", "cpu,host=serverA,region=us-east value=1.0,str=\"foo\nbar\" 1000000000"),
        case("StringWithCommas escaped", r#"cpu,host=serverA,region=us-east value=1.0,str="foo\,bar" 1000000000"#),
        case("StringWithCommas", r#"cpu,host=serverA,region=us-east value=1.0,str="foo,bar" 1000000000"#),
        case("String trailing escape", r#"cpu,host=serverA,region=us-east str="foo\\",str2="bar" 1000000000"#),
        case("QuotedMeasurement", r#""cpu",host=serverA,region=us-east value=1.0 1000000000"#),
        case("QuotedTags", r#"cpu,"host"="serverA",region=us-east value=1.0 1000000000"#),
        case("TrailingSlash", r"a v=1 0\"),
        case("UnbalancedQuotedTags", "baz,mytag=\"a x=1 1441103862125\nbaz,mytag=a z=1 1441103862126"),
        case("EscapedStringsAndCommas", r#"cpu,host=serverA,region=us-east value="{Hello\"{,}\" World}" 1000000000"#),
        case("EscapedStringsAndCommas escaped", r#"cpu,host=serverA,region=us-east value="{Hello\"{\,}\" World}" 1000000000"#),
        case("StringWithEquals", r#"cpu,host=serverA,region=us-east str="foo=bar",value=1.0 1000000000"#),
        case("StringWithBackslash quote", r#"cpu value="test\\\"" 1000000000"#),
        case("StringWithBackslash", r#"cpu value="test\\" 1000000000"#),
        case("StringWithBackslash escaped quote", r#"cpu value="test\"" 1000000000"#),
        case("BoolField", "cpu,host=serverA,region=us-east true=true,t=t,T=T,TRUE=TRUE,True=True,false=false,f=f,F=F,FALSE=FALSE,False=False 1000000000"),
        case("UnicodeString", r#"cpu,host=serverA,region=us-east value="wè" 1000000000"#),
        // timestamps
        case("NegativeTimestamp", "cpu value=1 -1"),
        case("MaxTimestamp", "cpu value=1 9223372036854775806"),
        case("MinTimestamp", "cpu value=1 -9223372036854775806"),
        case("InvalidTimestamp over", "cpu value=1 9223372036854775808"),
        case("InvalidTimestamp under", "cpu value=1 -92233720368547758078"),
        case("InvalidTimestamp minus", "cpu value=1 -"),
        case("InvalidTimestamp minus slash", "cpu value=1 -/"),
        case("InvalidTimestamp question", "cpu value=1 -1?"),
        case("InvalidTimestamp trailing minus", "cpu value=1 1-"),
        case("InvalidTimestamp extra", "cpu value=1 9223372036854775807 12"),
        case("FloatWithoutDecimal", "cpu value=1 1000000000"),
        case("NegativeFloat value", "cpu value=-0.64 1000000000"),
        case("FloatNoDecimal", "cpu value=1. 1000000000"),
        case("FloatScientific e+06", "cpu value=6.632243e+06 1000000000"),
        case("LargeInteger", "cpu value=6632243i 1000000000"),
        case("NaN", "cpu value=NaN 1000000000"),
        case("nAn", "cpu value=nAn 1000000000"),
        case("NaN no timestamp", "cpu value=NaN"),
        case("IntsFloats", "cpu,host=serverA,region=us-east int=10i,float=11.0,float2=12.1 1000000000"),
        case("KeyUnsorted", "cpu,last=1,first=2 value=1i"),
        case("ToString", r#"cpu,host=serverA,region=us-east bool=false,float=11,float2=12.123,int=10i,str="string val" 1000000000"#),
        // TestParsePointsWithPrecision and NoTime
        case_p("Precision default", "", "cpu,host=serverA,region=us-east value=1.0 946730096789012345"),
        case_p("Precision n", "n", "cpu,host=serverA,region=us-east value=1.0 946730096789012345"),
        case_p("Precision us", "us", "cpu,host=serverA,region=us-east value=1.0 946730096789012"),
        case_p("Precision ms", "ms", "cpu,host=serverA,region=us-east value=1.0 946730096789"),
        case_p("Precision s", "s", "cpu,host=serverA,region=us-east value=1.0 946730096"),
        case_p("PrecisionNoTime n", "n", "cpu,host=serverA,region=us-east value=1.0"),
        case_p("PrecisionNoTime us", "us", "cpu,host=serverA,region=us-east value=1.0"),
        case_p("PrecisionNoTime ms", "ms", "cpu,host=serverA,region=us-east value=1.0"),
        case_p("PrecisionNoTime s", "s", "cpu,host=serverA,region=us-east value=1.0"),
        // TestParsePointsWithPrecisionComments
        case("Comment only", "# comment only"),
        case("Comment above", "# a point is below\ncpu,host=serverA,region=us-east value=1.0 946730096789012345"),
        case("Comment below", "cpu,host=serverA,region=us-east value=1.0 946730096789012345\n# end of points"),
        case("Comment indented", "\t# a point is below\ncpu,host=serverA,region=us-east value=1.0 946730096789012345"),
        // quotes in keys and tags
        case("QuotesInFieldKey", "cpu \"a=1\ncpu value=2 1"),
        case("QuotesInFieldKey unparsable", r#"cpu "\, '= "\ v=1.0"#),
        case("QuotesInTags", "t159,label=hey\\ \"ya a=1i,value=0i\nt159,label=another a=2i,value=1i 1"),
        case("BlankLine", "cpu value=1i 1000000000\n\ncpu value=2i 2000000000"),
        // TestPoint_FieldIterator
        case("FieldIterator simple", "mfi v=42i,f=42 36"),
        case(
            "FieldIterator map",
            "\nm1 v=42\nm2 v=42i\nm3 v=\"string\"\nm4 v=true\nm5 v=\"string\\\"with\\\"escapes\"\nm6 v=42i,f=42,g=42.314,u=123u\nm7 a=2i,b=3i,c=true,d=\"stuff\",e=-0.23,f=123.456\n",
        ),
        // TestEscapeStringField
        case("EscapeStringField plain", r#"t1 s="abcdefg""#),
        case("EscapeStringField quote", r#"t2 s="one double quote \" .""#),
        case("EscapeStringField quote then backslash", r#"t3 s="quote \" then backslash \\ .""#),
        case("EscapeStringField backslash then quote", r#"t4 s="backslash \\ then quote \" .""#),
        // TestParseKeyBytes
        case("KeyBytes plain", "m,k=v f=1"),
        case("KeyBytes escaped measurement", r"m\ q,k=v f=1"),
        case("KeyBytes escaped tag key", r"mk,k\ q=v f=1"),
        case("KeyBytes both", r"m\ q2,k\ q=v f=1"),
    ];
    // TestParsePointMaxFloat64 / MinFloat64
    for (name, value) in [
        ("MaxFloat64 out of range", format!("1{max_float}")),
        ("MaxFloat64", max_float.clone()),
        ("MaxFloat64 leading zeros", format!("0000{max_float}")),
        ("MinFloat64 out of range", format!("-1{max_float}")),
        ("MinFloat64", format!("-{max_float}")),
        ("MinFloat64 leading zeros", format!("-0000000{max_float}")),
    ] {
        v.push(case(
            name,
            &format!("cpu,host=serverA,region=us-west value={value}"),
        ));
    }
    // TestParsePointWithVariousTags, TestNewPointLargeNumberOfTags
    let tags: String = (1..=1000).map(|i| format!(",t{i}=x")).collect();
    v.push(case("VariousTags 1000", &format!("mtags{tags} v=0")));
    let tags: String = (0..255).map(|i| format!(",tag{i}=value{i}")).collect();
    v.push(case("LargeNumberOfTags 255", &format!("cpu{tags} value=1")));
    // TestNewPointsRejectsMaxKey: the key is measurement + 4 + field key
    let key = "a".repeat(65_535 - "value".len() - 4);
    v.push(case(
        "RejectsMaxKey at the limit",
        &format!("{key} value=1,ok=2.0"),
    ));
    v.push(case(
        "RejectsMaxKey one over",
        &format!("{key}a value=1,ok=2.0"),
    ));
    v
}

/// The cases the collector issue names, and probes of 1.6's storage rules.
fn issue_cases() -> Vec<Case> {
    let mut v = vec![
        case("issue: duplicate tag keys", "cpu,a=1,a=2 v=1 1000000001"),
        case("issue: time as tag key", "cpu,time=1 v=1 1000000002"),
        case("issue: time as the only field key", "cpu time=1 1000000003"),
        case(
            "issue: time field beside another",
            "cpu time=1i,v=2 1000000004",
        ),
        case("issue: 1u on 1.x", "cpu v=1u 1000000005"),
        case(
            "issue: one field two types in one request",
            "cpu v=1i 1000000006\ncpu v=2 1000000007\ncpu w=1 1000000008",
        ),
        case(
            "issue: one field two types in one line",
            "cpu v=1i,v=2 1000000009",
        ),
        case(
            "issue: one field written twice, one type",
            "cpu v=1i,v=2i 1000000010",
        ),
        case("issue: float .1", "cpu v=.1 1000000011"),
        case("issue: float 1.", "cpu v=1. 1000000012"),
        case("issue: float -.5", "cpu v=-.5 1000000013"),
        case(
            "issue: escaped backslash in tag value",
            r"cpu,t=a\\b v=1 1000000014",
        ),
        case(
            "issue: escaped backslash in tag key",
            r"cpu,a\\=b=1 v=1 1000000015",
        ),
        case(
            "issue: lone backslash in tag value",
            r"cpu,t=a\b v=1 1000000016",
        ),
        case("issue: NaN", "cpu v=NaN 1000000017"),
        case("issue: Inf", "cpu v=Inf 1000000018"),
        case("issue: -Inf", "cpu v=-Inf 1000000019"),
        case("issue: inf", "cpu v=inf 1000000020"),
        case_p(
            "issue: precision=us with a timestamp",
            "us",
            "cpu v=1 1700000000000000000",
        ),
        case_p(
            "issue: precision=u with a timestamp",
            "u",
            "cpu v=1 1700000000000000",
        ),
        case_p("issue: precision=us without a timestamp", "us", "cpu v=1"),
        case_p("probe: precision=x", "x", "cpu v=1 1700000000000000000"),
        case_p("probe: precision=ns", "ns", "cpu v=1 1700000000000000000"),
        case_p("probe: precision=m", "m", "cpu v=1 28333333"),
        case_p("probe: precision=h", "h", "cpu v=1 472222"),
        case_p(
            "probe: precision=h out of range",
            "h",
            "cpu v=1 9223372036854775",
        ),
        case_p("probe: precision=s no timestamp", "s", "cpu v=1"),
        case("probe: tag and field of one name", "cpu,a=1 a=2 1000000021"),
        case(
            "probe: time tag among good lines",
            "cpu,time=1 v=1 1000000022\ncpu v=2 1000000023",
        ),
        case(
            "probe: bad line among good ones",
            "cpu v=1 1000000024\nbad line here\ncpu v=3 1000000025",
        ),
        case("probe: only bad lines", "bad1\nbad2"),
        case("probe: tab after measurement", "cpu\tv=1 1000000026"),
        case("probe: CR line end", "cpu v=1 1000000027\r"),
        case("probe: CR without timestamp", "cpu v=1\r"),
        case(
            "probe: CRLF body",
            "cpu v=1 1000000028\r\ncpu v=2 1000000029\r\n",
        ),
        case("probe: NUL after value", "cpu v=1\x00"),
        case(
            "probe: string field with newline",
            "cpu s=\"a\nb\" 1000000030",
        ),
        case(
            "probe: integer overflow",
            "cpu v=9223372036854775808i 1000000031",
        ),
        case("probe: float overflow", "cpu v=1e400 1000000032"),
        case("probe: float underflow", "cpu v=1e-400 1000000033"),
        case("probe: float subnormal", "cpu v=5e-324 1000000034"),
        case(
            "probe: long float digits",
            "cpu v=1234567890123456789012345.5 1000000035",
        ),
        case("probe: plus sign", "cpu v=+1 1000000036"),
        case("probe: leading zeros", "cpu v=007 1000000037"),
        case("probe: exponent upper", "cpu v=1E+2 1000000038"),
        case("probe: negative zero", "cpu v=-0 1000000039"),
        case("probe: boolean tRUE", "cpu b=tRUE 1000000040"),
        case("probe: boolean True", "cpu b=True 1000000041"),
        case("probe: trailing comma", "cpu v=1, 1000000042"),
        case("probe: extra word", "cpu v=1 1 extra"),
        case(
            "probe: quoted measurement with quote",
            r#"q2"x v=1 1000000043"#,
        ),
        case("probe: unicode measurement", "été v=1 1000000044"),
        case("probe: empty string", "cpu s=\"\" 1000000045"),
        case("probe: measurement only comma", ",cpu v=1"),
        case("probe: leading spaces", "   cpu v=1 1000000046"),
        case("probe: leading tab", "\tcpu v=1 1000000047"),
        case(
            "probe: escaped newline in tag",
            "cpu,t=a\\\nb v=1 1000000048",
        ),
        case(
            "probe: escaped comma in field key",
            r"cpu v\,w=1 1000000049",
        ),
        case(
            "probe: escaped quote in field key",
            r#"cpu v\"w=1 1000000050"#,
        ),
        case(
            "probe: escaped equals in field value string",
            r#"cpu s="a\=b" 1000000051"#,
        ),
        case(
            "probe: tag value with equals escaped",
            r"cpu,t=a\=b v=1 1000000052",
        ),
        case(
            "probe: three fields two types",
            "cpu a=1i,b=2,a=3 1000000053",
        ),
        case(
            "probe: many lines mixed types",
            "cpu a=1i 1000000054\ncpu b=2 1000000055\ncpu a=3 1000000056\ncpu c=true 1000000057",
        ),
        case(
            "probe: conflict first then good",
            "cpu a=1 1000000058\ncpu a=\"x\" 1000000059\ncpu b=1 1000000060",
        ),
        case(
            "probe: timestamps out of order",
            "cpu v=1 1000000062\ncpu v=2 1000000061",
        ),
        case(
            "probe: same point twice",
            "cpu v=1 1000000063\ncpu v=2 1000000063",
        ),
        case(
            "probe: different shards one measurement",
            "cpu v=1i 1000000064\ncpu v=2i 1700000000000000000",
        ),
        case(
            "probe: big string",
            &format!("cpu s=\"{}\" 1000000065", "a".repeat(100_000)),
        ),
    ];
    // Keys at and around the 65,535-byte limit: measurement + 4 + field key.
    for (name, len) in [
        ("issue: key exactly at the limit", 65_535 - 4 - 1),
        ("issue: key just under the limit", 65_535 - 4 - 2),
        ("issue: key one over the limit", 65_535 - 4),
        ("issue: long key influxd takes", 60_000),
    ] {
        v.push(case(
            name,
            &format!("k{} v=1 1000000066", "x".repeat(len - 1)),
        ));
    }
    v.push(case(
        "issue: long tag key at the limit",
        &format!(
            "kt,{}=1 v=1 1000000067",
            "t".repeat(65_535 - 4 - 1 - "kt,=1".len())
        ),
    ));
    v.push(case(
        "issue: long tag key over the limit",
        &format!(
            "kt2,{}=1 v=1 1000000068",
            "t".repeat(65_535 - 4 - "kt2,=1".len())
        ),
    ));
    v
}

/// Each case writing to the measurement `cpu` writes to `cpu<index>` instead.
fn isolate(index: usize, body: &str) -> String {
    body.split('\n')
        .map(|l| {
            let rest = l
                .strip_prefix("cpu,")
                .map(|r| (',', r))
                .or_else(|| l.strip_prefix("cpu ").map(|r| (' ', r)))
                .or_else(|| l.strip_prefix("cpu\t").map(|r| ('\t', r)));
            match rest {
                Some((sep, r)) => format!("cpu{index}{sep}{r}"),
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn write_url(base: &str, db: &str, precision: Option<&str>) -> String {
    match precision {
        Some(p) => format!("{base}/write?db={db}&precision={p}"),
        None => format!("{base}/write?db={db}"),
    }
}

fn post(url: &str, body: &[u8]) -> (u16, String) {
    http(url, "POST", &[("Content-Type", "text/plain")], body)
}

fn query(influx: &Influxd, db: &str, q: &str) -> Value {
    let (status, text) = post_form(
        &format!("{}/query", influx.url()),
        &[("db", db), ("q", q), ("epoch", "ns")],
    );
    assert_eq!(status, 200, "{q}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// Every stored point of a database: series (measurement and tags) → rows of non-null field
/// values, the time dropped for points stamped at reception (within two hours of now), and the
/// types of the fields that hold a value.
type Stored = (
    BTreeMap<String, Vec<String>>,
    BTreeSet<(String, String, String)>,
);

fn stored(influx: &Influxd, db: &str) -> Stored {
    let now_ns = now_s() as i128 * 1_000_000_000;
    let mut series: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut with_data: BTreeSet<(String, String)> = BTreeSet::new();
    let data = query(influx, db, "SELECT * FROM /.*/ GROUP BY *");
    for s in data["results"][0]["series"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = s["name"].as_str().unwrap_or("").to_string();
        if name == "storwatch_init" {
            continue;
        }
        // GROUP BY * lists every tag key of the database; a point's own tags are the non-empty.
        let tags: BTreeMap<&str, &str> = s["tags"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                v.as_str()
                    .filter(|v| !v.is_empty())
                    .map(|v| (k.as_str(), v))
            })
            .collect();
        let key = format!("{name} {tags:?}");
        let columns: Vec<&str> = s["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap_or(""))
            .collect();
        for row in s["values"].as_array().into_iter().flatten() {
            let row = row.as_array().unwrap();
            let t = row[0].as_i64().map(i128::from).unwrap_or(0);
            let time = if (t - now_ns).abs() < 7_200_000_000_000 {
                "now".to_string()
            } else {
                t.to_string()
            };
            let mut values = Vec::new();
            for (c, v) in columns.iter().zip(row).skip(1) {
                if !v.is_null() {
                    values.push(format!("{c}={v}"));
                    with_data.insert((name.clone(), c.to_string()));
                }
            }
            series
                .entry(key.clone())
                .or_default()
                .push(format!("{time} {}", values.join(",")));
        }
    }
    for rows in series.values_mut() {
        rows.sort();
    }
    let mut types = BTreeSet::new();
    let keys = query(influx, db, "SHOW FIELD KEYS");
    for s in keys["results"][0]["series"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = s["name"].as_str().unwrap_or("").to_string();
        for row in s["values"].as_array().into_iter().flatten() {
            let field = row[0].as_str().unwrap_or("").to_string();
            if with_data.contains(&(name.clone(), field.clone())) {
                types.insert((
                    name.clone(),
                    field,
                    row[1].as_str().unwrap_or("").to_string(),
                ));
            }
        }
    }
    (series, types)
}

/// Timestamps (ns) of the case lines that have one, to open their shards first.
fn timestamps(cases: &[Case]) -> BTreeSet<i64> {
    let mut out = BTreeSet::new();
    for c in cases {
        let precision = c
            .precision
            .and_then(|p| {
                Precision::of(
                    Some(p),
                    storwatch_wire::lp::Api::V1,
                    storwatch_wire::lp::Backend::V1,
                )
                .ok()
            })
            .unwrap_or(Precision::NS);
        for (_, l) in lines(&c.body) {
            if let Checked::Accepted(a) = check_line(
                l,
                Backends::of(&[]),
                precision,
                now_s() as i64 * 1_000_000_000,
                &LineLimits::NONE,
            ) {
                out.insert(a.ts_ns);
            }
        }
    }
    out
}

fn write_config(dir: &Path, influx: &str) -> std::path::PathBuf {
    let path = dir.join("collector.toml");
    std::fs::write(
        &path,
        format!(
            r#"listen = "127.0.0.1:{COLLECTOR_PORT}"
queue_dir = "{q}"
token_file = "{q}/no-such-file"
insecure_open = true
[limits]
max_future_s = 0
max_past_s = 0
[heartbeat]
interval_s = 0
[[outputs]]
name = "influx"
url = "{influx}"
db = "via"
version = "1.x"
backoff_min_ms = 50
backoff_max_s = 1
"#,
            q = dir.join("queue").display(),
        ),
    )
    .unwrap();
    path
}

#[test]
fn collector_answers_and_stores_like_influxd() {
    let dir = tempfile::tempdir().unwrap();
    let influx = Influxd::start(&dir.path().join("influx"), INFLUX_PORT);
    influx.create_db("direct");
    influx.create_db("via");

    let mut cases = parser_test_cases();
    cases.extend(issue_cases());
    for (i, c) in cases.iter_mut().enumerate() {
        c.body = isolate(i, &c.body);
    }
    assert!(cases.len() >= 250, "{} cases", cases.len());

    // Open every shard the cases write to, in both databases.
    let init: String = timestamps(&cases)
        .iter()
        .chain(std::iter::once(&(now_s() as i64 * 1_000_000_000)))
        .map(|ts| format!("storwatch_init v=1 {ts}\n"))
        .collect();
    for db in ["direct", "via"] {
        let (s, text) = post(&write_url(&influx.url(), db, None), init.as_bytes());
        assert_eq!(s, 204, "{text}");
    }

    let config = write_config(dir.path(), &influx.url());
    let collector = Collector::start_with_config(
        Path::new(env!("CARGO_BIN_EXE_storwatch-collector")),
        &config,
        COLLECTOR_PORT,
    );

    let mut mismatches = Vec::new();
    let mut refused = 0;
    for c in &cases {
        let (direct, direct_text) = post(
            &write_url(&influx.url(), "direct", c.precision),
            c.body.as_bytes(),
        );
        let (via, via_text) = post(
            &write_url(&collector.url(""), "via", c.precision),
            c.body.as_bytes(),
        );
        if direct != via {
            mismatches.push(format!(
                "{}: influxd {direct} {}, collector {via} {}",
                c.name,
                direct_text.chars().take(300).collect::<String>(),
                via_text.chars().take(300).collect::<String>()
            ));
            continue;
        }
        if via != 204 {
            refused += 1;
            // The collector names the refused lines; influxd names them by their text.
            let v: Value = serde_json::from_str(&via_text).unwrap_or(Value::Null);
            let named = v["lines"].as_array().map_or(0, Vec::len);
            if named == 0 && !v["error"].as_str().unwrap_or("").contains("precision") {
                mismatches.push(format!(
                    "{}: the collector's 400 names no line: {via_text}",
                    c.name
                ));
            }
        }
    }

    // Everything acknowledged reaches influxd, nothing is dead-lettered.
    let drained = wait_for(Duration::from_secs(60), || {
        let (_, h) = http(&collector.url("/health"), "GET", &[], b"");
        serde_json::from_str::<Value>(&h).is_ok_and(|v| v["outputs"][0]["backlog_bytes"] == 0)
    });
    assert!(drained, "the collector did not deliver its queue");
    let dead = collector.metric("output_dead_lettered_total{output=\"influx\"}");
    if dead > 0 {
        let text = std::fs::read_to_string(dir.path().join("queue/dead-letter/influx.lp"));
        for l in text
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with('#'))
        {
            mismatches.push(format!("acknowledged, then refused by influxd: {l}"));
        }
    }
    let (direct_series, direct_types) = stored(&influx, "direct");
    let (via_series, via_types) = stored(&influx, "via");
    for (key, rows) in &direct_series {
        match via_series.get(key) {
            None => mismatches.push(format!("series only in influxd: {key}")),
            Some(r) if r != rows => {
                mismatches.push(format!("{key}: influxd {rows:?}, collector {r:?}"))
            }
            Some(_) => {}
        }
    }
    for key in via_series
        .keys()
        .filter(|k| !direct_series.contains_key(*k))
    {
        mismatches.push(format!("series only through the collector: {key}"));
    }
    for t in direct_types.symmetric_difference(&via_types) {
        mismatches.push(format!("field type differs: {t:?}"));
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} cases differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
    // The cases exercise both outcomes.
    assert!(
        refused > 50 && refused < cases.len() - 50,
        "{refused} refused"
    );
    assert!(direct_series.len() > 100, "{} series", direct_series.len());
}
