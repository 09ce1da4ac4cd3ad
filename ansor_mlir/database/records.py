"""The names callers import from here, each defined in the module of its concept: the records
(`measure_record`, `program_check`, `program_record`), their schema (`schema`, `schema_upgrade`), the store
(`log_file`, `claims`, `tuning_log`) and the questions asked of them (`queries`). New code reaches a store
through the `Database` interface (`database`, `registry`)."""

from ansor_mlir.database.claims import Claim, claim_target
from ansor_mlir.database.log_file import log_problem, parse_line, read_program_records, read_records
from ansor_mlir.database.measure_record import Record, now, record_from_dict, result_from_dict
from ansor_mlir.database.program_check import ProgramCheck
from ansor_mlir.database.program_record import ProgramLine, ProgramRecord, program_record_from_dict
from ansor_mlir.database.queries import best_records, for_target, program_choice, task_history
from ansor_mlir.database.schema import FORMAT_VERSION, SchemaError, is_time, producer_versions
from ansor_mlir.database.schema_upgrade import upgrade_legacy
from ansor_mlir.database.tuning_log import TuningLog, append_records

__all__ = [
    "FORMAT_VERSION", "Claim", "ProgramCheck", "ProgramLine", "ProgramRecord", "Record", "SchemaError",
    "TuningLog", "append_records", "best_records", "claim_target", "for_target", "is_time", "log_problem", "now",
    "parse_line", "producer_versions", "program_choice", "program_record_from_dict", "read_program_records",
    "read_records", "record_from_dict", "result_from_dict", "task_history", "upgrade_legacy",
]
